"""mgmatch.pipeline"""
