from mgmatch.app.cli import main

main()
