"""What tests share that is not a fixture: the browser, the fuzzer, small X clients with known behaviour, paths."""
