from matrixgen.cli.main import console

console()
