"""The scheduler role: the timing wheel, the planner, the fire loop, the sweeper and the purger.

:data:`ARM_AHEAD_S` is the longest lead a scheduler arms ahead with unless told otherwise
(``ServerSettings.arm_ahead_s``, ``--arm-ahead``): the lead of a second grows with the jobs it
holds (0.5 ms each, from 1 s), so 30 s is reached by 60,000 jobs due in one second, which record in
about 10 s here (docs/performance.md). Longer would buy nothing for the herds this machine measures
and would widen what a scheduler holds in memory, and what a pause or an edit has to remove,
without making any slot more on time; it stays well inside the wheel's horizon.
"""

ARM_AHEAD_S = 30.0
