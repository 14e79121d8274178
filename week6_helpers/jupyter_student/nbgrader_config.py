"""nbgrader settings for students: what the Validate button does.

nbgrader's defaults give each cell 30 s and then report "Success!" even when a
cell was interrupted. These notebooks train models for minutes, so Validate
runs them in the course's fast mode (the same code on less data), gives each
cell ten minutes, and counts an error in any cell, interrupted ones included,
as a failure. A JupyterHub administrator copies this file to
/etc/jupyter/nbgrader_config.py for the students' servers.
"""
c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

c.Execute.timeout = 600
c.Execute.interrupt_on_timeout = True
c.Execute.extra_arguments = [
    "--HistoryManager.hist_file=:memory:",
    "--IPKernelApp.exec_lines=import os; os.environ['WEEK6_FAST'] = '1'",
]
c.Validator.validate_all = True
