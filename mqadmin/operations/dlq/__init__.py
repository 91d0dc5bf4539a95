"""Dead letters: reading, listing, the ledger, resend, discard, export and import."""
