"""Trickle queries (Tremor's language) run an event at a time: the select operator and the query's graph."""
