"""The values every floor above passes on: the errors and findings, the
vocabularies, `{field}` templates, jobs and targets, reference templates and
trigger decisions. Documents read each file into them; the engine's stages
build on them."""
