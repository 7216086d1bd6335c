from django.contrib import admin
from django.urls import path

from djangoproj import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("hello/<str:name>/", views.hello, name="hello"),
    path("form/", views.message_form, name="form"),
    path("form/thanks/", views.thanks, name="thanks"),
    path("upload/", views.upload, name="upload"),
    path("styled/", views.styled, name="styled"),
]
