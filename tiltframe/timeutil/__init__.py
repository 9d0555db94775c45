"""Time zones, timestamp parsing and ``within`` ranges, in plain Python (retrieval and validation)."""
