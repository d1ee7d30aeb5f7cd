from varcheck.cli import main

main()
