"""mgmatch.app"""
