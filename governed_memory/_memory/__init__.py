"""_memory"""
