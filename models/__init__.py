"""mgmatch.models"""
