"""The library of the quarantine entry commands (`matrixgen quarantine add`,
`list`): one entry built from the command's options and checked (its ids, its
tracker, that it reaches the tests of its jobs, by the emitters' rule), written
under the file's lock; and the entries filtered and listed. A feature over the
core: it imports the core's quarantine (model, apply, checks, render, edit) and
emit, never another feature."""
