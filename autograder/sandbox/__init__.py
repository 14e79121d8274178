"""Sandboxed execution of student code, out of the student's kernel."""
