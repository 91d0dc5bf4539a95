"""Tests of engine.filter."""
