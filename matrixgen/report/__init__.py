"""`matrixgen report`: a static HTML site of what matrixgen knows (docs/report.md).

Every figure comes from the function that computes it for the other commands;
this package only lays them out, with the pages the features it is handed add
(`views.contributions`), and imports no other feature."""
