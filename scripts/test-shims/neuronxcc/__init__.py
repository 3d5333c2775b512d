"""TEST-ONLY stand-in for the Neuron compiler package's legacy `neuronxcc.nki` namespace (see
scripts/test-shims/README.md). Only `neuronxcc.nki.typing` is provided, as nkisim's own
`nki.typing` (router_topk annotates its parameters with it); nothing of the compiler is."""
