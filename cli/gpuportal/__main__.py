from gpuportal.cli import run

run()
