"""Pieces shared by the name server and the broker: properties files and config loading."""
