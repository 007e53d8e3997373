"""`matrixgen quarantine add/remove/lift/list/audit/propose/migrate`."""
