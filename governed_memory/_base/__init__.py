"""_base"""
