from mgmatch.cli import main

main()
