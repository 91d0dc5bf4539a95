"""The dashboard's screens, one module each."""
