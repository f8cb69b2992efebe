"""What the tests share: counting backends, real servers started as the README says, a headless
browser, simulated endpoints, synthetic studies, and the scripts some tests run as processes."""
