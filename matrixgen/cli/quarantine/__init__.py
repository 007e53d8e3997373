"""`matrixgen quarantine add/remove/lift/list/audit/propose/migrate`
(cli.registry lists them).

Each command's help lists its exit codes.
"""
