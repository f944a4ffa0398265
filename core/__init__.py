"""mgmatch.core"""
