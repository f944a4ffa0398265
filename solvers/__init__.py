"""mgmatch.solvers"""
