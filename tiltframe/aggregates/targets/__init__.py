"""What each target (Spark columns, SQL expressions, pandas Series) gives the registry's finalize and combine
functions: one module per target, each implementing ``aggregates.registry.Ops``."""
