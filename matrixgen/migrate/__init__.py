"""`matrixgen quarantine migrate`: turn Megatron-LM's quarantine habits into entries.

Upstream takes a case out of CI by renaming its scope (`mr-broken`,
`mr-github-broken`, `nightly-broken`, `mr-github-temp-disabled`, `flaky`) or by
commenting its row out, with the tracker, if any, only in a comment
(`# hang: #513`). Migration restores the row (`mr-broken` -> `mr`, or the row
uncommented) and adds a skip entry for exactly the restored jobs in exactly the
restored scopes, so every real target of the pipelines matrixgen generates
selects the same jobs as before (Megatron-LM's own parser reads no quarantine
file: `Migration.parser_changes`).

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
