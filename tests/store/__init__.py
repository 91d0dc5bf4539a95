"""Tests of engine.store."""
