"""`matrixgen quarantine migrate`: turn Megatron-LM's quarantine habits (renamed
scopes, rows commented out) into entries; docs/quarantine.md says what it does
to a row and why Megatron-LM's own parser is not affected.

A habit is migrated only when that is unambiguous; everything else is reported
and left as it is:
- `flaky` does not say which scope the row ran in before: nothing to restore;
- a restored scope no other row uses, or that the row already has;
- a row or commented-out item naming several trackers, or none (unless
  `--default-tracker` names an umbrella issue);
- commented-out text that does not uncomment to a well-formed row or block at
  its position;
- a restored job that another row already has, or an entry that would also hit
  jobs that are not quarantined today (checked on the migrated tree).

Recipe files are edited as text at the YAML nodes' positions, so every other
byte, comments included, stays as it was.
"""
