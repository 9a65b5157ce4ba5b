"""The ledger, the system of record: capture and fold (capture), lookups and counts (units), canon (canon)."""
