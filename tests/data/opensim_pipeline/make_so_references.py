import opensim as osim, sys, time, shutil, os
setup, out = sys.argv[1], sys.argv[2]
tool = osim.AnalyzeTool(setup)
tool.setResultsDir(out)
t=time.perf_counter(); tool.run(); print("SO wall", time.perf_counter()-t)
