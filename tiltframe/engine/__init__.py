"""The Spark side: sessions, sources, event typing, bucketing, partial states and the streaming pipeline."""
