"""What the dashboard reads and changes, built on mqadmin.operations (no widgets here)."""
