"""Run folders on disk: results/<run id>/, one per lab run (docs/architecture.md)."""
