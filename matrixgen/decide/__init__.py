"""The `decide` feature: what a CI event, and the labels on its pull or merge
request, run (`decision`), shown as a table, Markdown or step outputs
(`render`)."""
