"""_keys"""
