"""The terminal dashboard (`mqadmin dashboard`): Textual screens over mqadmin's operations."""
