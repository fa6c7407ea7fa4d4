"""Make the OpenSim 4.6 static-optimization references of tests/io/test_opensim_setups.py.

    python tests/data/opensim_pipeline/make_so_references.py SETUP.xml OUT_DIR

run on the shipped setups (jaxmb/data/opensim_pipeline): arm26_Setup_StaticOptimization.xml →
arm26_phys_opensim46_activation.sto, arm26_Setup_StaticOptimization_Nonphysiological.xml →
arm26_nonphys_opensim46_activation.sto, gait10dof18musc/walk_Setup_SO.xml →
walk_so_opensim46_activation.sto (each OUT_DIR/<name>_StaticOptimization_activation.sto renamed).
"""

import sys
import time

import opensim as osim

setup, out = sys.argv[1], sys.argv[2]
tool = osim.AnalyzeTool(setup)
tool.setResultsDir(out)
t = time.perf_counter()
tool.run()
print("SO wall", time.perf_counter() - t)
