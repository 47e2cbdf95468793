"""The offline world: synthetic images, a synthetic pool, the worked-example simulation and the demo.

The demo, the tests and the benchmarks use it to run every stage without Flickr, MTurk or the Hub.

May import: everything else in ``pipeline`` (it is the roof, nothing imports it but commands,
tests and benchmarks).
"""
