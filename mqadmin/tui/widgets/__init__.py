"""Widgets of the dashboard: no data access, only drawing what screens hand them."""
