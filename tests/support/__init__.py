"""What the tests share: counting backends, real servers started as the docs say, a headless
browser, simulated endpoints, synthetic studies, and the scripts some tests run as processes."""
