"""nki.compiler: NKI's compiler driver. nkisim compiles nothing (each nl / nisa call runs on the
simulated core as it is made), so this module is empty; it exists so that code which imports it
(the NKI library's test harness, in simulation mode) imports."""
