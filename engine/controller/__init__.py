"""The 5.3 controller: broker sets' SyncStateSets, epochs and ids, and automatic election."""
