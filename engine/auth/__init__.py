"""Access control: users and rules (5.3's ACL 2.0 model), 4.9's plain_acl.yml, request checks."""
