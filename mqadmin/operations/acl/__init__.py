"""Access control on brokers: 5.3's ACL 2.0 (users and rules) and 4.9's ACL 1.0."""
