"""The results database: schema, upgrades, writes, claims and queries."""
