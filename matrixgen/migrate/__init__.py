"""`matrixgen quarantine migrate`: turn Megatron-LM's quarantine habits into entries.

Upstream takes a case out of CI by renaming its scope (`mr-broken`,
`mr-github-broken`, `nightly-broken`, `mr-github-temp-disabled`, `flaky`) or by
commenting its row out, with the tracker, if any, only in a comment
(`# hang: #513`). Migration restores the row (`mr-broken` -> `mr`, or the row
uncommented) and adds a skip entry for exactly the restored jobs in exactly the
restored scopes, so every real target selects the same jobs as before, while the
quarantined ones become visible (`list --with-quarantined`) and carry a tracker.

That holds for the pipelines matrixgen generates, which apply the quarantine file.
Megatron-LM's own parser does not read it: on a format_version 1 tree the plan
counts, per target, the jobs that parser would select once the habits are gone
(`Migration.parser_changes`; matrixgen's selection before quarantine is the
parser's), and the CLI writes such a plan only when told that matrixgen generates
every pipeline of the tree.

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

Recipe files are edited as text at the exact positions of the YAML nodes (a scope
value renamed, `# ` removed from the commented lines), so every other byte,
comments included, stays as it was.
"""
