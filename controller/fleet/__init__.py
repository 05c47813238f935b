"""The fleet: a table's records, signed checkpoints and status to the casino's MQTT broker, and
the witness's cosignature back (``protocol``: the topics and payloads)."""
